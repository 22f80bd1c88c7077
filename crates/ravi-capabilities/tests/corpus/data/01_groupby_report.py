# Revenue by region and product from a CSV a tool returns.
import io
import pandas as pd

orders = pd.read_csv(io.StringIO(read_file(path="orders.csv")))
orders["revenue"] = orders["units"] * orders["unit_price"]
print(orders.shape)
print(orders.dtypes.to_string())
by_region = orders.groupby("region")["revenue"].agg(["sum", "mean", "count"]).round(2)
print(by_region.sort_values("sum", ascending=False).to_string())
top = orders.groupby(["region", "product"])["units"].sum().sort_values(ascending=False).head(5)
print(top.to_string())
print(f"best region: {by_region['sum'].idxmax()} ({by_region['sum'].max():,.2f})")
