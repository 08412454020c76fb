import pytest

from pagination import page_count, paginate


def test_page_count_rounds_up():
    assert page_count(10, 3) == 4
    assert page_count(9, 3) == 3
    assert page_count(0, 3) == 0


def test_page_numbers_start_at_one():
    with pytest.raises(ValueError):
        paginate([1, 2, 3], 0, 2)


def test_past_the_last_page_is_empty():
    assert paginate(list(range(5)), 9, 2) == []
