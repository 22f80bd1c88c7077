# A chart saved under /tmp and a written summary, as a model would finish a task.
import io
import matplotlib.pyplot as plt
import pandas as pd

df = pd.read_csv(io.StringIO(read_file(path="orders.csv")))
by = df.groupby("product")["units"].sum().sort_values()
fig, ax = plt.subplots(figsize=(5, 3))
by.plot.barh(ax=ax, title="Units by product")
fig.tight_layout()
fig.savefig("/tmp/units_by_product.png", dpi=80)
plt.close(fig)
import os
print(os.path.getsize("/tmp/units_by_product.png") > 1000)
lines = [f"- {name}: {int(units)} units" for name, units in by.items()]
summary = "Units by product\n" + "\n".join(lines) + "\n"
print(summary, end="")
write_file(path="summary.md", content=summary)
print("summary written")
