"""The payload rules without workers: settings, the reference format, resolving
nested references, and writing chunks inside a transaction (both backends)."""

from __future__ import annotations

import json

import pytest

from ductline import ConfigurationError, PayloadTooLarge
from ductline.config import load_settings
from ductline.store import payloads


def test_limits_default_to_one_and_sixty_four_mib(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in ("DUCTLINE_PAYLOAD_INLINE_BYTES", "DUCTLINE_PAYLOAD_MAX_BYTES", "DUCTLINE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    limits = payloads.Limits.from_settings(load_settings())
    assert (limits.inline_bytes, limits.max_bytes, limits.chunk_bytes) == (1_048_576, 67_108_864, 262_144)


def test_limits_come_from_the_environment_and_the_toml_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ductline.toml").write_text("payload_inline_bytes = 4096\npayload_max_bytes = 8192\n")
    assert payloads.Limits.from_settings(load_settings()) == payloads.Limits(4096, 8192)
    monkeypatch.setenv("DUCTLINE_PAYLOAD_INLINE_BYTES", "65536")
    assert load_settings().payload_inline_bytes == 65536
    assert load_settings(payload_max_bytes=100).payload_max_bytes == 100


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "lots", ""])
def test_invalid_limits_are_refused(monkeypatch, tmp_path, raw):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", raw)
    with pytest.raises(ConfigurationError, match="payload_max_bytes"):
        load_settings()


def test_reference_format():
    text = payloads.reference("ab" * 16, 1234)
    assert text == '{"__ductline__":"payload","id":"abababababababababababababababab","size":1234}'
    assert payloads.parse_reference(text) == payloads.Ref("ab" * 16, 1234)
    assert payloads.parse_reference(" " + text) is None and payloads.parse_reference(text + " ") is None
    assert payloads.describe(text) == "<payload 1.2 KiB>"
    assert payloads.describe('"x"') is None
    # The same text inside a user's string is escaped JSON: never a reference.
    assert not payloads.contains_references(json.dumps(text))


def test_size_is_utf8_bytes_and_the_hard_limit_names_what_size_and_limit():
    assert payloads.size_of('"\u00e9"') == 4
    assert payloads.check_size("x" * 10, "output of step 'a'", 10) == 10
    with pytest.raises(PayloadTooLarge) as caught:
        payloads.check_size("x" * 11, "output of step 'a'", 10)
    assert str(caught.value) == ("output of step 'a': 11 bytes of JSON exceed the limit of 10 bytes "
                                 "(payload_max_bytes)")
    assert (caught.value.size, caught.value.limit) == (11, 10)


def test_spill_writes_chunks_and_resolve_reads_nested_references(store):
    limits = payloads.Limits(inline_bytes=100, max_bytes=10_000, chunk_bytes=64)
    inner = json.dumps("y" * 300)
    with store.transaction() as tx:
        assert payloads.spill(tx, "run1", "[1]", limits) == "[1]"
        inner_ref = payloads.spill(tx, "run1", inner, limits)
        outer = f"[[{inner_ref},{json.dumps('z' * 150)}]]"
        outer_ref = payloads.spill(tx, "run1", outer, limits)
    ref = payloads.parse_reference(inner_ref)
    assert ref.size == 302 and payloads.chunk_count(store, ref.id) == 5  # ceil(302 / 64)
    assert payloads.load(store, "run1", f"[{outer_ref}]") == f"[[[{inner},{json.dumps('z' * 150)}]]]"
    with pytest.raises(Exception, match="has no chunk 0"):  # a payload is read only for its own run
        payloads.load(store, "another-run", inner_ref)
