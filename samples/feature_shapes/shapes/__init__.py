"""Areas of simple shapes: a sample project for the feature template."""
