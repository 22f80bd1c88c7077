# A pivot table, then a merge with the customer list and a summary per segment.
import io
import pandas as pd

orders = pd.read_csv(io.StringIO(read_file(path="orders.csv")))
customers = pd.read_csv(io.StringIO(read_file(path="customers.csv")))
orders["revenue"] = orders.units * orders.unit_price
pivot = orders.pivot_table(index="region", columns="product", values="units", aggfunc="sum", fill_value=0)
print(pivot)
print(pivot.sum(axis=1).to_dict())
merged = orders.merge(customers, on="customer", how="left")
print(merged[["order_id", "name", "segment", "revenue"]].head(6).to_string(index=False))
seg = merged.groupby("segment").agg(orders=("order_id", "count"), revenue=("revenue", "sum"), since=("since", "min"))
print(seg.round(2))
print(merged.groupby("segment")["revenue"].describe().round(2).to_string())
