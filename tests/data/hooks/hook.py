"""A command hook for the tests: ``hook.py MODE [RECORD_FILE]``; the event arrives on stdin.

Modes: block, mutate, append, output, fail, garbage, hang, silent. The payload is copied
to RECORD_FILE (if given) so a test can see what the hook received.
"""

import json
import os
import sys
import time

mode = sys.argv[1]
record = sys.argv[2] if len(sys.argv) > 2 else ""
payload = json.load(sys.stdin)
if record:
    with open(record, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "payload": payload}) + "\n")

if mode == "block":
    print(json.dumps({"decision": "block", "reason": f"no {payload.get('tool_name')} on the telescope"}))
elif mode == "mutate":
    args = dict(payload.get("arguments") or {})
    args["text"] = args.get("text", "").upper()
    print(json.dumps({"mutate_input": args}))
elif mode == "append":
    print(json.dumps({"append_context": "remember: magnitudes are AB"}))
elif mode == "output":
    print(json.dumps({"mutate_output": "[redacted] " + str(payload.get("output", ""))[:20]}))
elif mode == "fail":
    print("hook script broke", file=sys.stderr)
    sys.exit(3)
elif mode == "garbage":
    print("this is not json")
elif mode == "hang":
    time.sleep(60)
elif mode == "silent":
    pass
