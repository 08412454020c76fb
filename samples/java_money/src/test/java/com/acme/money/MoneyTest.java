package com.acme.money;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class MoneyTest {
    @Test
    void splitsEvenly() {
        assertArrayEquals(new long[] {25, 25, 25, 25}, Money.split(100, 4));
    }

    @Test
    void refusesNoParts() {
        assertThrows(IllegalArgumentException.class, () -> Money.split(100, 0));
    }

    @Test
    void totals() {
        assertEquals(60, Money.total(new long[] {10, 20, 30}));
    }
}
