from shapes.names import describe


def test_describe():
    assert describe("circle") == "a circle"
