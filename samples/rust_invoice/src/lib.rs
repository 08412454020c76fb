//! Invoice totals: what a customer pays, and what one unit cost on average.

/// One line of an invoice: how many units, at what price each (in cents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub quantity: u32,
    pub unit_price_cents: u64,
}

impl Line {
    pub fn new(quantity: u32, unit_price_cents: u64) -> Self {
        Line {
            quantity,
            unit_price_cents,
        }
    }

    /// The line's total in cents.
    pub fn total_cents(&self) -> u64 {
        u64::from(self.quantity) * self.unit_price_cents
    }
}

/// The invoice's total in cents.
///
/// ```
/// use invoice::{total_cents, Line};
/// assert_eq!(total_cents(&[Line::new(2, 150), Line::new(1, 99)]), 399);
/// ```
pub fn total_cents(lines: &[Line]) -> u64 {
    lines.iter().map(Line::total_cents).sum()
}

/// The average price of one unit sold, in cents (rounded down); 0 when no unit was sold.
pub fn average_unit_price_cents(lines: &[Line]) -> u64 {
    let units: u64 = lines.iter().map(|line| u64::from(line.quantity)).sum();
    total_cents(lines) / units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_total_is_quantity_times_price() {
        assert_eq!(Line::new(3, 250).total_cents(), 750);
    }

    #[test]
    fn average_of_two_lines() {
        let lines = [Line::new(1, 100), Line::new(3, 300)];
        assert_eq!(average_unit_price_cents(&lines), 250);
    }
}
