#!/usr/bin/env python3
"""Differential check, by hand: random conversations (system or not, multi-turn, tool calls with tool /
ipython results, Mistral parallel calls, Unicode, quotes, template-looking text, tools in the user or system
message, Llama 3.1 built-in tools) through jinja2 with transformers' settings (make_references.py) and
through `minfer template`, compared byte for byte. strftime_now is the wall clock on both sides: run with
TZ=UTC, away from midnight.

Usage: TZ=UTC python3 differential_check.py MINFER_BINARY [SEED] [COUNT]
"""
import json, os, random, subprocess, sys, tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_references as mr
from datetime import datetime
env = mr.make_env()
env.globals['strftime_now'] = lambda fmt: datetime.now().strftime(fmt)
MINFER = sys.argv[1]
R = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
texts = ["Hi", "  padded  \n", "", "ünïcödé ✓ 中文 🎉", "quote \" and ' and \\ back", "<|eot_id|> inside", "multi\nline\n\ntext", "{\"json\": [1, 2]}", "tab\there", "%s %d {{ x }}"]
def rtext(): return R.choice(texts)
def rargs(): return R.choice([{}, {"a": 1}, {"city": "Paris", "n": 2.5, "ok": True, "none": None}, {"list": [1, "x", {"y": []}]}, {"u": "é✓"}])
TOOLS = [mr.WEATHER, mr.SEARCH, {"type": "function", "function": {"name": "noargs", "description": "x", "parameters": {}}}]
def convo(family):
    msgs = []
    if R.random() < 0.5: msgs.append({"role": "system", "content": rtext()})
    n = R.randint(1, 4)
    for i in range(n):
        msgs.append({"role": "user", "content": rtext()})
        if i < n - 1 or R.random() < 0.3:
            if family != 'gemma' and R.random() < 0.4:
                cid = ''.join(R.choice('abcXYZ019') for _ in range(9))
                k = 2 if (family == 'mistral' and R.random() < 0.3) else 1
                calls = [{"id": cid if j == 0 else cid[::-1], "type": "function", "function": {"name": R.choice(["get_current_temperature", "search_web"]), "arguments": rargs()}} for j in range(k)]
                msgs.append({"role": "assistant", "tool_calls": calls})
                for c in calls:
                    msgs.append({"role": R.choice(["tool", "ipython"]) if family == 'llama' else "tool", "tool_call_id": c["id"], "content": R.choice([rtext(), {"k": 1}]) if family == 'llama' else rtext()})
                if R.random() < 0.7: msgs.append({"role": "assistant", "content": rtext()})
                else: break
            else:
                msgs.append({"role": "assistant", "content": rtext()})
    tools = R.choice([None, TOOLS[:1], TOOLS]) if R.random() < 0.6 else None
    return msgs, tools
fams = [('llama', mr.T_LLAMA31, mr.LLAMA3), ('llama', mr.T_LLAMA32, mr.LLAMA3), ('mistral', mr.T_MISTRAL, mr.MISTRAL), ('gemma', mr.T_GEMMA3, mr.GEMMA3)]
agree = differ = both_err = 0
for it in range(int(sys.argv[3]) if len(sys.argv) > 3 else 100):
    fam, t, toks = R.choice(fams)
    msgs, tools = convo(fam)
    tv = dict(toks)
    if fam == 'llama' and R.random() < 0.3: tv['tools_in_user_message'] = R.random() < 0.5
    if 'Llama-3.1' in t and R.random() < 0.2: tv['builtin_tools'] = ["brave_search", "wolfram_alpha"]
    spec = {"template": t, "messages": msgs, "tools": tools, "add_generation_prompt": R.random() < 0.7, "template_vars": tv}
    try:
        exp = mr.render(env, spec); perr = None
    except Exception as e:
        exp = None; perr = str(e)
    path = os.path.join(tempfile.gettempdir(), 'minfer-differential-%d.json' % os.getpid())
    json.dump({"messages": msgs, "tools": tools, "add_generation_prompt": spec["add_generation_prompt"], "template_vars": tv}, open(path, 'w'), ensure_ascii=False)
    p = subprocess.run([MINFER, 'template', os.path.join(HERE, t), '--messages', path], capture_output=True)
    if exp is None:
        if p.returncode != 0: both_err += 1
        else:
            differ += 1; print('PY ERR only', perr, json.dumps(spec)[:300])
        continue
    if p.returncode == 0 and p.stdout.decode() == exp: agree += 1
    else:
        differ += 1
        print('DIFF', t, p.returncode, p.stderr.decode()[:200]); print(repr(exp[:400])); print(repr(p.stdout.decode()[:400])); print(json.dumps(spec, ensure_ascii=False)[:600])
print('agree', agree, 'both_err', both_err, 'differ', differ)
sys.exit(1 if differ else 0)
