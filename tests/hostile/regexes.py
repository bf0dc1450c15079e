"""Random regular expressions for the pattern fuzzers: atoms under every quantifier (optional, star, plus, exact and
ranged counts), nested groups and alternatives, the shapes that make grammar engines fail or slow down."""

from __future__ import annotations

from hypothesis import strategies as st


def regexes(atoms: st.SearchStrategy[str], counts: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    """Patterns of up to three items a level, two levels of groups and alternatives deep, from `atoms`, with exact
    repetition counts drawn from `counts`."""

    @st.composite
    def regex(draw: st.DrawFn, depth: int = 0) -> str:
        parts = []
        for _ in range(draw(st.integers(1, 3))):
            atom = draw(atoms) if depth >= 2 or draw(st.booleans()) else f"({draw(regex(depth + 1))})"
            quantifier = draw(
                st.one_of(
                    st.just(""),
                    st.sampled_from(["?", "*", "+"]),
                    st.builds(lambda n: f"{{{n}}}", counts),
                    st.builds(lambda m, n: f"{{{m},{m + n}}}", st.integers(0, 5), st.integers(0, 40)),
                )
            )
            parts.append(atom + quantifier)
        alternatives = ["".join(parts)] + ([draw(regex(depth + 1))] if depth < 2 and draw(st.booleans()) else [])
        return "|".join(alternatives)

    return regex()
