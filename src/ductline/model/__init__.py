"""Pure domain model: states, records and retry decisions. Imports nothing above it."""
