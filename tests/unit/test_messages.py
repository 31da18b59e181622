"""Messages for users: values shown short whatever they hold, lines kept to one bounded line."""

from conceptlab.messages import LINE_LIMIT, VALUE_LIMIT, clip, one_line, shown


def test_a_huge_value_is_shown_short_without_building_its_repr():
    assert len(shown(list(range(10**7)))) <= VALUE_LIMIT + 1
    assert len(shown({"k" * 10**6: "v"})) <= VALUE_LIMIT + 1
    assert "digits" in shown(10**100000)  # repr would refuse (over Python's int-to-text limit)
    loop = []
    loop.append(loop)
    assert shown(loop).startswith("[[[")  # a self-containing list stops after a few levels


def test_control_characters_are_escaped_and_lines_clipped():
    assert one_line("a\nb\rc\x00d\x1b[2J") == "a\\nb\\rc\\x00d\\x1b[2J"
    assert "\n" not in shown("x\ny") and shown("x\ny") == "'x\\ny'"
    long = one_line("x" * 10_000)
    assert len(long) < LINE_LIMIT + 40 and long.endswith("(9400 more characters)")
    assert clip("short", 10) == "short"
