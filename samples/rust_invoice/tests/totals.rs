use invoice::{average_unit_price_cents, total_cents, Line};

#[test]
fn total_of_several_lines() {
    let lines = [Line::new(2, 1250), Line::new(1, 499)];
    assert_eq!(total_cents(&lines), 2999);
}

#[test]
fn average_rounds_down() {
    let lines = [Line::new(3, 100), Line::new(0, 999), Line::new(1, 101)];
    assert_eq!(average_unit_price_cents(&lines), 100);
}
