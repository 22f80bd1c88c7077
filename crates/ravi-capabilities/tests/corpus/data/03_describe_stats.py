# describe(), quantiles, correlation and value counts.
import io
import pandas as pd

df = pd.read_csv(io.StringIO(read_file(path="orders.csv")))
print(df.describe().round(3))
print(df[["units", "unit_price"]].quantile([0.1, 0.5, 0.9]))
print(round(df["units"].corr(df["unit_price"]), 6))
print(df["product"].value_counts().to_string())
print(df.nlargest(3, "units")[["order_id", "units"]].to_string(index=False))
print(df.isna().sum().sum(), len(df.drop_duplicates(subset=["customer"])))
