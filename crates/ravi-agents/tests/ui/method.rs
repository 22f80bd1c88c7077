struct Calc;

impl Calc {
    /// Add.
    #[ravi_agents::tool]
    async fn add(&self, a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() {}
