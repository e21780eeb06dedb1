"""CPU lists as Linux writes them: the one parser and its inverse."""

from __future__ import annotations

import pytest

from pyparbench.cpulist import cpu_str, parse_cpu_list


def test_a_cpu_list_reads_back_as_it_was_written() -> None:
    assert parse_cpu_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert cpu_str(parse_cpu_list("0-3,8,10-11")) == "0-3,8,10-11"
    assert cpu_str([11, 0, 3, 2, 1, 8, 10, 3]) == "0-3,8,10-11"
    # As /proc/PID/status ends its line; an empty mask is no CPU.
    assert parse_cpu_list(" 5\n") == (5,)
    assert parse_cpu_list("") == () and cpu_str([]) == "none"


@pytest.mark.parametrize("text", ["0-", "a", "3-1", "0,,x", "1-2-3", "-1", "0 - 3"])
def test_a_bad_cpu_list_is_refused_naming_its_text(text: str) -> None:
    with pytest.raises(ValueError, match="not a CPU list: " + repr(text).replace("-", r"\-")):
        parse_cpu_list(text)
