from invoice.totals import Line, average_unit_price_cents, summary, tax_cents


def test_summary_of_a_normal_invoice():
    lines = [Line("widget", 2, 1250), Line("gadget", 1, 500)]
    assert summary(lines) == {
        "subtotal": 3000,
        "tax": 600,
        "total": 3600,
        "average_unit_price": 1000,
    }


def test_tax_rounds_to_the_nearest_cent():
    assert tax_cents([Line("pen", 1, 333)], 10) == 33


def test_average_unit_price():
    assert average_unit_price_cents([Line("a", 3, 100), Line("b", 1, 500)]) == 200
