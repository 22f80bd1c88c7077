struct Opaque;

/// Make an opaque value.
#[ravi_agents::tool]
async fn make() -> Opaque {
    Opaque
}

fn main() {}
