//! Integration tests of the tokenizer, streaming detokenizer and engram token map on the real V4.1 tokenizer.json.
mod text_support;
mod variant_support;

use lockstep::text::tokenizer::names::{IMAGE, SYSTEM};
use lockstep::text::{encode_chat, find_tokenizer_json, ChatOptions, ContentBlock, Detokenizer, Message, Role, TokenMap, Tokenizer, TokenizerError};
use text_support::tokenizer;

#[test]
fn special_token_ids_are_the_known_v41_ids() {
    let s = tokenizer().special();
    assert_eq!((s.bos, s.eos, s.pad), (Some(0), Some(1), Some(2)));
    assert_eq!((s.user, s.assistant), (Some(128803), Some(128804)));
    assert_eq!((s.think_start, s.think_end), (Some(128821), Some(128822)));
    assert_eq!(s.system, Some(128799), "<｜System｜> doubles as the DSpark noise token");
    assert_eq!(s.image, Some(129264));
    assert_eq!(s.dsml, Some(128825));
    assert_eq!(s.latest_reminder, Some(128828));
    assert_eq!(s.tasks, [128829, 128830, 128831, 128832, 128836, 128845].map(Some));
    assert_eq!(tokenizer().vocab_size(), 129280);
}

#[test]
fn special_tokens_encode_atomically_and_no_bos_is_added() {
    let tok = tokenizer();
    let s = tok.special();
    let ids = tok.encode("<｜User｜>hi<｜Assistant｜><think>").unwrap();
    assert_eq!(ids.first().copied(), s.user);
    assert_eq!(&ids[ids.len() - 2..], &[s.assistant, s.think_start].map(Option::unwrap));
    assert_eq!(ids.len(), 4, "{ids:?}");
    let sys = tok.encode("<｜begin▁of▁sentence｜><｜System｜>x").unwrap();
    assert_eq!(&sys[..2], &[s.bos, s.system].map(Option::unwrap));
    let dsml = tok.encode("<｜DSML｜ invoke name=\"f\">").unwrap();
    assert_eq!(dsml.iter().filter(|&&i| Some(i) == s.dsml).count(), 1, "{dsml:?}");
    assert!(!tok.encode("plain text").unwrap().contains(&s.bos.unwrap()));
}

#[test]
fn encode_decode_round_trips_mixed_scripts_and_whitespace() {
    let tok = tokenizer();
    for text in ["Hello, world!", "  leading and trailing  ", "毕老师！1 + 1 = 2", "emoji 🦀 and é\n\ttabs", "12345678"]
    {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
    }
}

#[test]
fn skip_special_tokens_drops_bos_eos_but_keeps_the_image_and_role_tokens() {
    let tok = tokenizer();
    let s = tok.special();
    let mut ids = vec![s.bos.unwrap(), s.user.unwrap()];
    ids.extend(tok.encode("look").unwrap());
    ids.extend([s.image, s.image, s.eos].map(Option::unwrap));
    assert_eq!(
        tok.decode(&ids, false).unwrap(),
        "<｜begin▁of▁sentence｜><｜User｜>look<｜deepseek_image｜><｜deepseek_image｜><｜end▁of▁sentence｜>"
    );
    assert_eq!(tok.decode(&ids, true).unwrap(), "<｜User｜>look<｜deepseek_image｜><｜deepseek_image｜>");
}

#[test]
fn decode_rejects_ids_outside_the_vocabulary() {
    assert!(tokenizer().decode(&[5, 129280], false).is_err());
}

#[test]
fn detokenizer_emits_only_complete_utf8_and_reassembles_the_text() {
    let tok = tokenizer();
    let text = "Grüße 🦀🦀 中文测试 done.";
    let ids = tok.encode(text).unwrap();
    // the crab emoji is split over byte tokens, so some pushes must hold text back
    let mut d = Detokenizer::new(false);
    let mut out = String::new();
    let mut held = 0;
    for &id in &ids {
        let piece = d.push(tok, id).unwrap();
        assert!(!piece.contains('\u{FFFD}'), "partial UTF-8 leaked: {piece:?}");
        held += usize::from(piece.is_empty());
        out.push_str(&piece);
    }
    out.push_str(&d.finish(tok).unwrap());
    assert_eq!(out, text);
    assert!(held > 0, "expected at least one held-back byte token in {ids:?}");
}

#[test]
fn detokenizer_skips_special_tokens_when_asked_and_flushes_a_dangling_byte() {
    let tok = tokenizer();
    let s = tok.special();
    let mut ids = vec![s.bos.unwrap()];
    ids.extend(tok.encode("ok🦀").unwrap());
    ids.push(s.eos.unwrap());
    let mut d = Detokenizer::new(true);
    let out: String = ids.iter().map(|&id| d.push(tok, id).unwrap()).collect();
    assert_eq!(out + &d.finish(tok).unwrap(), "ok🦀");
    // a stream cut inside the emoji: nothing partial before finish, U+FFFD after
    let crab = tok.encode("🦀").unwrap();
    assert!(crab.len() > 1, "{crab:?}");
    let mut d = Detokenizer::new(false);
    assert_eq!(d.push(tok, crab[0]).unwrap(), "");
    assert_eq!(d.pending(), 1);
    assert!(d.finish(tok).unwrap().contains('\u{FFFD}'));
    // an id outside the vocabulary is refused without disturbing the stream
    let mut d = Detokenizer::new(false);
    assert_eq!(d.push(tok, crab[0]).unwrap(), "");
    assert!(d.push(tok, 129_280).is_err());
    let rest: String = crab[1..].iter().map(|&id| d.push(tok, id).unwrap()).collect();
    assert_eq!(rest, "🦀");
}

#[test]
fn engram_token_map_has_99092_classes_and_matches_the_reference_fingerprint() {
    let map = TokenMap::build(tokenizer()).unwrap();
    assert_eq!(map.classes_of.len(), 129280);
    assert_eq!(map.classes, 99_092);
    map.check_classes(99_092).unwrap();
    assert_eq!(map.class(2), Some(2), "pad's class pads engram n-grams");
    // classes are dense and numbered in first-seen order of token id
    let mut next = 0u32;
    for &c in &map.classes_of {
        assert!(c <= next);
        next = next.max(c + 1);
    }
    // sha256 of the class array as little-endian u32, from the Python reference build_compressed_token_map
    use sha2::{Digest, Sha256};
    let bytes: Vec<u8> = map.classes_of.iter().flat_map(|c| c.to_le_bytes()).collect();
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, "c60a86322ec17b4142bfef3c57a8d81fb428550cdf487f88a4320cb59fe46481");
}

#[test]
fn engram_token_map_folds_case_and_leading_space_variants_together() {
    let tok = tokenizer();
    let map = TokenMap::build(tok).unwrap();
    let class = |s: &str| {
        let ids = tok.encode(s).unwrap();
        assert_eq!(ids.len(), 1, "{s:?} is not one token: {ids:?}");
        map.class(ids[0]).unwrap()
    };
    assert_eq!(class(" The"), class("the"));
    assert_eq!(class("THE"), class("the"));
    assert_ne!(class("the"), class("them"));
}

#[test]
fn a_tokenizer_without_a_v41_only_token_loads_encodes_plain_text_alike_and_refuses_only_what_needs_it() {
    let full = tokenizer();
    let path = find_tokenizer_json(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the tokenizer was fetched");
    let json = std::fs::read_to_string(path).expect("tokenizer.json");
    let plain = "Plain prompts keep their ids: 毕老师 🦀, <b>bold</b>, and 12345678.";
    let chat = |msgs: &[Message], thinking: bool| encode_chat(msgs, &ChatOptions { thinking, ..ChatOptions::default() }).expect("rendered");
    let hello = [Message::text(Role::User, "Hello!")];
    let image = [Message { content: vec![ContentBlock::Text("Describe".into()), ContentBlock::Image("a.png".into())], ..Message::text(Role::User, "") }];
    // the image token removed; the V4 tokenizer's name for the id V4.1 calls <｜System｜>
    let cases: [(&str, Option<&str>, &[Message], bool); 2] = [(IMAGE, None, &image, false), (SYSTEM, Some("<｜place▁holder▁no▁799｜>"), &hello, true)];
    for (name, rename, needs, thinking) in cases {
        let tok = Tokenizer::from_bytes(variant_support::tokenizer_without(&json, name, rename).as_bytes()).unwrap_or_else(|e| panic!("without {name}: {e}"));
        assert!(tok.token_to_id(name).is_none() && tok.require(name).is_err(), "{name} is gone");
        assert_eq!(tok.encode(plain).unwrap(), full.encode(plain).unwrap(), "without {name}: a plain prompt");
        let text = chat(&hello, false);
        assert_eq!(tok.encode_rendered(&text).unwrap(), full.encode_rendered(&text).unwrap(), "without {name}: a chat that needs no {name}");
        let text = chat(needs, thinking);
        assert!(full.encode_rendered(&text).is_ok());
        let e = tok.encode_rendered(&text).expect_err("the chat needs the missing token");
        assert!(matches!(e, TokenizerError::MissingToken(n) if n == name) && e.to_string().contains(name), "{e}");
    }
    assert_eq!(full.special().image, full.require(IMAGE).ok());
}
