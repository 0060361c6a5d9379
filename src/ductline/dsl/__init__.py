"""The pipeline DSL: a builder that produces an immutable, validated `Definition`."""
