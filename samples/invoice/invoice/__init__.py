"""A tiny invoicing library: line items in cents, totals and tax."""
