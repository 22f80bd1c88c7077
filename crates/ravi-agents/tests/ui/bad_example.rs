/// Look a word up.
#[ravi_agents::tool(examples = ["{\"word\": "])]
async fn define(word: String) -> String {
    word
}

/// Look a word up.
#[ravi_agents::tool(examples = ["[1, 2]"])]
async fn define_again(word: String) -> String {
    word
}

fn main() {}
