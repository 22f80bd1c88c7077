# Ravi code mode quickstart: one script, many tool calls, every call through the invoker.
#
#   cargo run --release -p ravi-cli -- run examples/quickstart.py --workspace "$(mktemp -d)" --approve all
#
# Each built-in tool is a Python function (keyword arguments only). Results are Python values;
# a result too large to inline comes back as an Artifact whose bytes stay on the host.

# 1. Write some data into the scratch workspace (write_file is a risky tool: it needs approval).
regions = ["north", "south", "east", "west"]
rows = ["region,month,amount"]
for i in range(48):
    rows.append(f"{regions[i % 4]},{1 + i // 4},{(i * 37) % 500 + 100}")
write_file(path="data/sales.csv", content="\n".join(rows) + "\n")
write_file(path="data/README.txt", content="Monthly sales per region, 2026.\n")

# 2. List what is there.
listing = list_files(path="data")
for entry in listing["entries"]:
    print(f"{entry['path']:<20} {entry.get('size', 0):>6} bytes")

# 3. Read and compute (plain Python: no tool call needed for the arithmetic).
csv_text = read_file(path="data/sales.csv")
totals = {}
for line in csv_text.splitlines()[1:]:
    region, month, amount = line.split(",")
    totals[region] = totals.get(region, 0) + int(amount)
best = max(totals, key=totals.get)
print("totals:", dict(sorted(totals.items())), "best:", best)
share = calculator(expression=f"{totals[best]} / {sum(totals.values())} * 100")
print(f"{best} made {share['result']:.1f}% of sales")

# 4. A large result comes back as an Artifact: only a preview enters the sandbox...
write_file(path="logs/app.log", content="".join(f"2026-11-23T10:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} ok\n" for i in range(6000)))
log = read_file(path="logs/app.log")
print(type(log).__name__, f"of {log.size} bytes, preview: {log.preview[:44]!r}")

# 5. ...and passing it to another tool hands over the full content by reference.
write_file(path="archive/app.log", content=log)
copy = file_exists(path="archive/app.log")
print("archived:", copy["exists"], copy["kind"])

# 6. Failures are exceptions the script can handle.
try:
    read_file(path="no/such/file.txt")
except ToolError as e:
    print("handled:", type(e).__name__)

write_file(path="report.txt", content=f"best region: {best} ({share['result']:.1f}%)\n")
print("calls left:", budget()["calls_remaining"])
