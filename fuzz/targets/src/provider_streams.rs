use ravi_kernel::ChatResponse;
use ravi_providers::fuzzing::decode;
use ravi_providers::sse::SseParser;

/// Where to cut `data`: lengths drawn from a generator seeded by the data itself, so an input
/// always replays the same way (the first byte picks the provider, the rest is the stream).
fn cuts(data: &[u8]) -> Vec<usize> {
    let mut x = data.iter().fold(0x9e37_79b9_7f4a_7c15_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        at += usize::try_from(x % 61).unwrap_or(0) + 1;
        out.push(at.min(data.len()));
    }
    out
}

/// Each provider's stream decoder (OpenAI Chat, OpenAI Responses, Anthropic; the first byte
/// picks one) on arbitrary SSE bytes cut at arbitrary places: never a panic, the outcome does not depend on the cuts, and a
/// response the decoder assembles survives the kernel's wire format unchanged.
pub fn provider_streams(input: &[u8]) {
    let Some((&provider, data)) = input.split_first() else {
        return;
    };
    let mut whole = SseParser::new();
    let mut events = whole.push(data);
    events.extend(whole.finish());
    let (deltas, outcome) = decode(usize::from(provider), &events);

    // The same bytes as the network might have split them.
    let mut parser = SseParser::new();
    let mut cut_events = Vec::new();
    let mut at = 0;
    for end in cuts(data) {
        parser.push_into(&data[at..end], &mut cut_events);
        at = end;
    }
    cut_events.extend(parser.finish());
    let (cut_deltas, cut_outcome) = decode(usize::from(provider), &cut_events);
    assert_eq!(deltas, cut_deltas, "the deltas depend on the chunking");
    assert_eq!(
        format!("{outcome:?}"),
        format!("{cut_outcome:?}"),
        "the outcome depends on the chunking"
    );

    if let Ok(response) = outcome {
        let wire = serde_json::to_string(&response).expect("a response serialises");
        let back: ChatResponse = serde_json::from_str(&wire).expect("and reads back");
        assert_eq!(
            back, response,
            "the wire format changed the response: {wire}"
        );
    }
}
