// SPDX-License-Identifier: MIT
// Evaluates CEL expressions for the test apiserver's admission policies (kube_admission.py), with
// @bufbuild/cel found through NODE_PATH (scripts/npm-deps cel). One JSON request per stdin line:
//   {"id": N, "variables": [{"name", "expression"}], "bindings": {...}, "exprs": ["...", ...]}
// variables are evaluated in order, each seeing the ones before it as `variables.NAME`; then every
// expr sees the bindings and `variables`. One JSON line answers each request:
//   {"id": N, "results": [{"value": V} | {"error": "message"}, ...]}
// Parsed plans are cached by expression text. Runs until stdin closes.
"use strict";
const readline = require("node:readline");
const { celEnv, isCelError, isCelList, isCelMap, parse, plan } = require("@bufbuild/cel");

const env = celEnv();
const plans = new Map();

function compiled(expr) {
    let p = plans.get(expr);
    if (p === undefined) {
        try {
            p = plan(env, parse(expr));
        } catch (e) {
            p = { error: "compilation failed: " + (e && e.message ? e.message : String(e)) };
        }
        plans.set(expr, p);
    }
    return p;
}

// A CEL value as JSON: bigint as number, the runtime's lists and maps as arrays and objects.
function plain(v) {
    if (typeof v === "bigint") return Number(v);
    if (v === null || typeof v !== "object") return v;
    if (isCelList(v)) return Array.from(v, plain);
    if (isCelMap(v)) {
        const out = {};
        for (const [k, x] of v) out[String(k)] = plain(x);
        return out;
    }
    if (Array.isArray(v)) return v.map(plain);
    return String(v);
}

function evaluate(expr, bindings) {
    const p = compiled(expr);
    if (typeof p !== "function") return { error: p.error };
    try {
        const r = p(bindings);
        if (isCelError(r)) return { error: r.message };
        return { value: plain(r), raw: r };
    } catch (e) {
        return { error: e && e.message ? e.message : String(e) };
    }
}

function answer(req) {
    const variables = {};
    const bindings = Object.assign({}, req.bindings || {}, { variables });
    for (const v of req.variables || []) {
        const r = evaluate(v.expression, bindings);
        // A failed variable stays unset: an expression that uses it fails in turn.
        if (!("error" in r)) variables[v.name] = r.raw;
    }
    const results = (req.exprs || []).map((e) => evaluate(e, bindings));
    for (const r of results) delete r.raw;
    return { id: req.id, results };
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on("line", (line) => {
    if (!line.trim()) return;
    let out;
    try {
        out = answer(JSON.parse(line));
    } catch (e) {
        out = { id: null, error: String(e), results: [] };
    }
    process.stdout.write(JSON.stringify(out) + "\n");
});
