def describe(kind: str) -> str:
    return f"a {kind}"
