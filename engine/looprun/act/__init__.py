"""Acting on the repository: the built-in tools and the policy that guards them."""
