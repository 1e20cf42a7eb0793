"""Events: the StageEvent record (stage.py), the typed payload of every stage (types.py and
the per-stage modules it gathers), the JSON Schema and TypeScript made from them, and the
readers and checkers. No torch here: the server and the tests import it without the compiler."""
