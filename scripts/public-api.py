#!/usr/bin/env python3
"""Counts the public API in rustdoc JSON (see scripts/public-api): public paths
to items, and the methods, fields and variants of public types."""
import json, sys, collections
doc = json.load(open(sys.argv[1]))
index, paths = doc["index"], doc["paths"]
crate = doc["root"]
seen = {}
def walk(mid, prefix):
    item = index[str(mid)] if str(mid) in index else index.get(mid)
    if item is None: return
    inner = item["inner"]
    kind = next(iter(inner))
    name = item.get("name")
    if kind == "module":
        p = prefix + ([name] if name and prefix is not None else [])
        for child in inner["module"]["items"]:
            walk(child, p)
        if prefix: seen["::".join(p)] = "mod"
        return
    if kind == "use":
        u = inner["use"]
        if u.get("id") is None: return
        if u.get("is_glob"):
            t = index.get(str(u["id"]))
            if t and "module" in t["inner"]:
                for child in t["inner"]["module"]["items"]:
                    walk(child, prefix)
            return
        t = index.get(str(u["id"]))
        if t is None: 
            seen["::".join(prefix+[u["name"]])] = "use(ext)"; return
        t = dict(t); t["name"] = u["name"]
        index["_tmp"] = t
        walk("_tmp", prefix); return
    if item.get("visibility") != "public" and kind not in ("impl",): return
    p = "::".join(prefix + [name])
    seen[p] = kind
    impls = inner.get(kind, {}).get("impls", []) if isinstance(inner.get(kind), dict) else []
    for f in (inner.get(kind, {}) or {}).get("fields", []) if kind=="struct" and isinstance(inner[kind].get("kind"),dict) else []:
        pass
    if kind == "struct":
        k = inner["struct"]["kind"]
        if isinstance(k, dict) and "plain" in k:
            for f in k["plain"]["fields"]:
                fi = index.get(str(f))
                if fi and fi.get("visibility") == "public": seen[p+"."+fi["name"]] = "field"
    if kind == "enum":
        for v in inner["enum"]["variants"]:
            vi = index.get(str(v)); seen[p+"::"+vi["name"]] = "variant"
    for imp in impls:
        ii = index.get(str(imp))
        if not ii: continue
        im = ii["inner"]["impl"]
        if im.get("trait") is not None or im.get("synthetic") or im.get("blanket_impl"): continue
        for m in im["items"]:
            mi = index.get(str(m))
            if mi and mi.get("visibility") == "public" and not any(a for a in mi.get("attrs",[]) if "hidden" in str(a)):
                seen[p+"::"+mi["name"]] = "method"
walk(crate, [])
seen = {k:v for k,v in seen.items() if k}
c = collections.Counter(seen.values())
mods = collections.Counter(k.split("::")[0] for k in seen)
members = ("method", "field", "variant")
items = [k for k, v in seen.items() if v not in members]
print("public items:", len(items), "(modules, types, traits, functions, constants, aliases)")
print("members:", {m: c[m] for m in members}, "total paths:", len(seen))
print("items by module:", dict(collections.Counter(
    (k.split("::")[1] if k.count("::") > 1 else "(root)") for k in items)))
if "-v" in sys.argv:
    for k in sorted(seen): print(seen[k], k)
