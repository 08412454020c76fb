from shipping import domestic_cost, international_cost


def test_light_domestic_parcel_pays_the_base_rate():
    assert domestic_cost(800) == 450


def test_heavy_domestic_parcel_pays_per_started_kilo():
    assert domestic_cost(1001) == 570
    assert domestic_cost(3000) == 690


def test_international_rate_depends_on_the_zone():
    assert international_cost(500, 1) == 1200
    assert international_cost(500, 3) == 1800


def test_heavy_international_parcel_pays_per_started_kilo():
    assert international_cost(2500, 2) == 1740
