"""`looprun init`'s scaffold: a team template extending a built-in one, and its cases."""
