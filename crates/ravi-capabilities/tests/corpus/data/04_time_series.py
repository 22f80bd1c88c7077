# Dates: monthly totals, a rolling mean, the busiest weekday.
import io
import pandas as pd

df = pd.read_csv(io.StringIO(read_file(path="orders.csv")), parse_dates=["date"])
df["revenue"] = df.units * df.unit_price
monthly = df.set_index("date").resample("MS")["revenue"].sum().round(2)
print(monthly.to_string())
print(monthly.rolling(3).mean().round(2).tolist())
print(df["date"].dt.day_name().value_counts().idxmax())
print(df["date"].min().date(), df["date"].max().date(), (df["date"].max() - df["date"].min()).days)
weekly = df.groupby(df["date"].dt.isocalendar().week)["units"].sum()
print(weekly.head(5).to_dict())
