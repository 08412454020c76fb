package com.acme.money;

/** Amounts of money in cents. */
public final class Money {
    private Money() {
    }

    /**
     * Splits {@code cents} into {@code parts} shares that differ by at most one cent and
     * add up to {@code cents}; the larger shares come first.
     */
    public static long[] split(long cents, int parts) {
        if (parts <= 0) {
            throw new IllegalArgumentException("parts must be positive: " + parts);
        }
        long[] shares = new long[parts];
        long each = cents / parts;
        for (int i = 0; i < parts; i++) {
            shares[i] = each;
        }
        return shares;
    }

    /** The sum of {@code shares}. */
    public static long total(long[] shares) {
        long sum = 0;
        for (long share : shares) {
            sum += share;
        }
        return sum;
    }
}
