/// Add.
#[ravi_agents::tool(name = "add numbers")]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
