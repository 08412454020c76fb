from units.temperature import celsius_to_fahrenheit


def test_water_boils_at_212_fahrenheit():
    assert celsius_to_fahrenheit(100) == 212
