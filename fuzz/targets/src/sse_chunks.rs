use ravi_providers::sse::SseParser;

/// The provider clients' SSE parser on arbitrary bytes cut at arbitrary places: never a
/// panic, and the events do not depend on where the network split the stream.
pub fn sse_chunks(data: &[u8]) {
    let Some(input) = crate::typed_input::<(&[u8], Vec<u8>)>(data) else {
        return;
    };
    let (data, cuts) = input;
    let mut whole = SseParser::new();
    let mut expected = whole.push(data);
    expected.extend(whole.finish());

    let mut parser = SseParser::new();
    let mut got = Vec::new();
    let mut at = 0;
    for cut in cuts {
        if at >= data.len() {
            break;
        }
        let end = (at + usize::from(cut) % 97 + 1).min(data.len());
        parser.push_into(&data[at..end], &mut got);
        at = end;
    }
    parser.push_into(&data[at..], &mut got);
    got.extend(parser.finish());
    assert_eq!(expected, got, "the events depend on the chunking");
}
