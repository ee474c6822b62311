#!/usr/bin/env python3
"""Single-stream decode tok/s and time to first token against a lockstep OpenAI-compatible server.

Prints one JSON line per (prompt, temperature) cell to stdout; notes go to stderr.
"""
import argparse
import json
import sys


from lockstep_client import ApiError, add_common_flags, float_list, median, note, resolve_model, stream_request

CODE_PROMPT = (
    "# Sorting helpers.\n\n"
    "def quicksort(xs):\n"
)
CHAT_MESSAGES = [
    {"role": "user", "content": "Explain in a few sentences how a hash map handles collisions."},
]


def build_body(prompt, model, temperature, args):
    body = {
        "model": model,
        "max_tokens": args.max_tokens,
        "temperature": temperature,
        "seed": args.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if prompt == "code":
        return "/v1/completions", dict(body, prompt=CODE_PROMPT)
    return "/v1/chat/completions", dict(body, messages=CHAT_MESSAGES)


def one_rep(path, body, args):
    """Runs one streamed request and returns its measurements."""
    r = stream_request(args.url, path, body, args.api_key, args.timeout)
    usage = r["final"].get("usage") or {}
    ls = r["final"].get("lockstep") or {}
    tokens = usage.get("completion_tokens")
    ttft = None if r["t_first"] is None else r["t_first"] - r["t_send"]
    decode = None
    if tokens is not None and tokens > 1 and r["t_first"] is not None and r["t_last"] > r["t_first"]:
        decode = (tokens - 1) / (r["t_last"] - r["t_first"])
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return {"ttft_s": ttft, "decode_tok_s": decode, "server_ttft_s": ls.get("ttft_s"),
            "server_decode_tok_s": ls.get("decode_tok_s"), "completion_tokens": tokens,
            "cached_tokens": cached, "token_sha": ls.get("token_sha")}


def run_cell(prompt, temperature, model, args):
    path, body = build_body(prompt, model, temperature, args)
    for _ in range(args.warmup):
        try:
            one_rep(path, body, args)
        except ApiError as e:
            note(f"warm-up {prompt} t={temperature:g} failed: {e}")
    reps, errors = [], []
    for i in range(args.reps):
        try:
            rep = one_rep(path, body, args)
        except ApiError as e:
            note(f"{prompt} t={temperature:g} rep {i} failed: {e}")
            errors.append(str(e))
            rep = {"token_sha": None}
        reps.append(rep)
    shas = [r.get("token_sha") for r in reps]
    tokens = [r.get("completion_tokens") for r in reps]
    return {
        "cell": f"{prompt}-t{temperature:g}",
        "prompt": prompt,
        "temperature": temperature,
        "reps": args.reps,
        "ttft_s_median": median(r.get("ttft_s") for r in reps),
        "server_ttft_s_median": median(r.get("server_ttft_s") for r in reps),
        "decode_tok_s_median": median(r.get("decode_tok_s") for r in reps),
        "server_decode_tok_s_median": median(r.get("server_decode_tok_s") for r in reps),
        "completion_tokens": median(tokens),
        "completion_tokens_per_rep": tokens,
        "cached_tokens_per_rep": [r.get("cached_tokens") for r in reps],
        "token_sha": shas,
        "repeat_equal": bool(shas) and all(s is not None for s in shas) and len(set(shas)) == 1,
        "errors": errors,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_flags(p)
    p.add_argument("--temperatures", type=float_list, default=[0.0, 1.0], help="comma list (default 0,1)")
    p.add_argument("--reps", type=int, default=3, help="measured requests per cell")
    p.add_argument("--warmup", type=int, default=0, help="unmeasured requests per cell before the reps")
    p.add_argument("--max-tokens", type=int, default=64, help="max_tokens per request")
    p.add_argument("--prompts", default="code,chat", help="comma list of code,chat")
    args = p.parse_args()
    prompts = [x.strip() for x in args.prompts.split(",") if x.strip()]
    bad = [x for x in prompts if x not in ("code", "chat")]
    if bad:
        p.error(f"unknown prompt(s): {','.join(bad)}")
    try:
        model = resolve_model(args)
    except ApiError as e:
        note(f"cannot resolve model: {e}")
        return 2
    note(f"model {model} at {args.url}, {args.reps} reps, max_tokens {args.max_tokens}, seed {args.seed}")
    failed = False
    for prompt in prompts:
        for t in args.temperatures:
            cell = run_cell(prompt, t, model, args)
            failed |= bool(cell["errors"])
            print(json.dumps(cell), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
