"""The solver side of lowp prove: one satisfiability query (z3, or bitwuzla on z3's SMT-LIB text), the verdicts,
and cheap walks of a term's DAG (its distinct subterms, its free variables)."""
from __future__ import annotations

PROVED, REFUTED, UNKNOWN = "PROVED", "REFUTED", "UNKNOWN"


def check(constraints: list, goal, timeout: float, solver: str = "z3"):
    """('unsat' | 'sat' | 'unknown', {variable: value}) for `goal` under `constraints`."""
    import z3
    if solver == "bitwuzla":
        return _check_bitwuzla(constraints, goal, timeout)
    s = z3.SolverFor("QF_BV")
    s.set("timeout", max(1, int(timeout * 1000)))
    s.add(*constraints, goal)
    result = s.check()
    if result == z3.unsat:
        return "unsat", {}
    if result == z3.sat:
        m = s.model()
        return "sat", {str(d): m[d].as_long() for d in m.decls() if z3.is_bv_value(m[d])}
    return "unknown", {}


def _check_bitwuzla(constraints, goal, timeout):
    import bitwuzla
    import z3
    s = z3.Solver()
    s.add(*constraints, goal)
    tm = bitwuzla.TermManager()
    opts = bitwuzla.Options()
    opts.set(bitwuzla.Option.PRODUCE_MODELS, True)
    opts.set(bitwuzla.Option.TIME_LIMIT_PER, max(1, int(timeout * 1000)))
    parser = bitwuzla.Parser(tm, opts)
    parser.parse(s.to_smt2().replace("(check-sat)", ""), True, False)
    bw = parser.bitwuzla()
    result = bw.check_sat()
    if result == bitwuzla.Result.UNSAT:
        return "unsat", {}
    if result == bitwuzla.Result.SAT:
        values = {}
        for term in parser.get_declared_funs():
            text = bw.get_value(term).value(2)
            values[term.symbol().strip("|")] = int(text, 2)
        return "sat", values
    return "unknown", {}


def subterms(term):
    """Each distinct subterm of a term once (its DAG, not its tree)."""
    seen, todo = set(), [term]
    while todo:
        t = todo.pop()
        key = t.get_id()
        if key not in seen:
            seen.add(key)
            yield t
            todo.extend(t.children())


def variables(term) -> list:
    """The free constants of a term (its inputs and free symbols), by one walk of its DAG: z3.z3util.get_vars
    prints every node it visits and takes minutes on a K = 64 sum."""
    import z3
    return [t for t in subterms(term) if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED]


def too_big(term, limit: int) -> bool:
    """More than `limit` distinct subterms (counted until the limit: cheap on the big ones)."""
    return any(count > limit for count, _ in enumerate(subterms(term), 1))
