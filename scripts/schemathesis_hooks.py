"""scripts/schemathesis's one hook: a generated send waits at most half a second.

A send waits as long as it asks (`timeout_secs`, up to 1e9 s in the
schema; absent, 30 s) for what it asks, and the program the run types
into never exits, so a generated `wait: "exit"` would outlast
schemathesis' 10 s request timeout. The hook shortens only a wait the
schema allows (absent, null, or a number from 0.5 to the schema's
maximum): a negative or out-of-range `timeout_secs` still goes as
generated, so its refusal is still checked. The configuration's body
overrides would not do: the coverage phase does not apply them.
"""

import schemathesis

LONGEST = 0.5
SCHEMA_MAXIMUM = 1e9


@schemathesis.hook
def before_call(context, case, kwargs):
    operation = case.operation
    if operation.method.upper() != "POST" or not operation.path.endswith("/{t}/send"):
        return
    if not isinstance(case.body, dict):
        return
    timeout = case.body.get("timeout_secs")
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is None or (number and LONGEST < timeout <= SCHEMA_MAXIMUM):
        case.body["timeout_secs"] = LONGEST
