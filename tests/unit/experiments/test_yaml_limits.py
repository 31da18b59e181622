"""YAML read defensively: aliases expanding past the limit, nesting past the limit and duplicate keys are refused in
one line; everything YAML allows below the limits (anchors, merge keys, class codes) still loads."""

import pytest

from conceptlab.experiments.loading import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    ConfigError,
    parse_override,
    parse_yaml,
    read_text_file,
)


def _fan_out(width: int, levels: int) -> str:
    lines = ["l0: &l0 [" + ", ".join(["1"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines)


def test_aliases_are_counted_as_the_values_they_stand_for():
    fine = _fan_out(10, 4)  # 10 + 100 + 1,000 + 10,000 values
    assert parse_yaml(fine, "t")["l3"][9][9][9] == [1] * 10
    with pytest.raises(ConfigError, match=f"more than {MAX_YAML_NODES:,} values"):
        parse_yaml(_fan_out(10, 5), "t")  # 111,110 values


def test_nesting_is_bounded():
    inner = MAX_YAML_DEPTH - 1  # lists inside the top-level mapping
    assert parse_yaml("a: " + "[" * inner + "]" * inner, "t") is not None
    with pytest.raises(ConfigError, match=f"nested more than {MAX_YAML_DEPTH} levels"):
        parse_yaml("a: " + "[" * (inner + 1) + "]" * (inner + 1), "t")


def test_a_self_containing_alias_is_refused():
    with pytest.raises(ConfigError, match="refers to a node that contains it"):
        parse_yaml("a: &x {b: *x}", "t")


def test_duplicate_keys_are_refused_but_merge_keys_still_work():
    with pytest.raises(ConfigError, match=r"duplicate key 'lr' at line 3"):
        parse_yaml("train:\n  lr: 1\n  lr: 2\n", "t")
    merged = parse_yaml("base: &b {lr: 1, steps: 2}\ntrain:\n  <<: *b\n  lr: 3\n", "t")
    assert merged["train"] == {"lr": 3, "steps": 2}
    assert parse_yaml("codes: [01, 10, 011]", "t")["codes"] == ["01", 10, "011"]


def test_syntax_errors_say_what_and_where():
    with pytest.raises(ConfigError, match=r"t: not valid YAML \(.*line 1, column \d+\)"):
        parse_yaml("a: [1, 2", "t")


def test_files_are_bounded_regular_utf8(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" + "#" * MAX_YAML_BYTES)
    with pytest.raises(ConfigError, match="over 1,048,576 bytes"):
        read_text_file(big, "config file")
    with pytest.raises(ConfigError, match="is not a regular file"):
        read_text_file(tmp_path, "config file")
    (tmp_path / "bad.yaml").write_bytes(b"a: \xff\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 0xff at offset 3\)"):
        read_text_file(tmp_path / "bad.yaml", "config file")


def test_an_override_value_is_bounded_too_and_a_non_yaml_one_is_text():
    levels = ["&l0 [" + ", ".join(["1"] * 10) + "]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 5)]
    with pytest.raises(ConfigError, match="values once its aliases"):
        parse_override("train.checkpoint_steps=[" + ", ".join(levels) + "]")
    assert parse_override("data.kind=a: b: c") == (["data", "kind"], "a: b: c")
