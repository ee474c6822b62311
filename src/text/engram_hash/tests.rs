//! Engram hash tests: numpy-pinned multipliers and hash ids computed independently in Python from the reference semantics.
use super::*;

const TINY_L1_PRIMES: [u64; 6] = [97, 101, 103, 107, 109, 113];
const TINY_L4_PRIMES: [u64; 6] = [127, 131, 137, 139, 149, 151];

fn layer(layer_id: u64, vocab: u64, primes: &[u64]) -> LayerHash {
    LayerHash {
        multipliers: hash_multipliers(layer_id, vocab, 4).unwrap(),
        primes: primes.to_vec(),
        offsets: prime_offsets(primes),
    }
}

fn tiny_hasher() -> NgramHasher {
    let layers = vec![layer(1, 64, &TINY_L1_PRIMES), layer(4, 64, &TINY_L4_PRIMES)];
    NgramHasher::new(4, 2, 2, 64, layers).unwrap()
}

fn tiny_history() -> EngramHistory {
    let map = TokenMap::synthetic(129_280, 64);
    let ids = [0, 5000, 129_264, 77, 12_345, 99_999, 3, 64];
    let mask = [false, false, true, false, false, false, false, false];
    let mut h = EngramHistory::new();
    h.extend(&map, &ids, Some(&mask)).unwrap();
    h
}

#[test]
fn multipliers_match_numpy_for_the_release_compressed_vocab() {
    let want: [(u64, [i64; 4]); 3] = [
        (1, [76632096046245, 4839876093313, 35959672319349, 73987337458391]),
        (14, [67716810739261, 51510806800915, 30921347202721, 82619226485591]),
        (4, [82260218638837, 5037792023067, 73653454411355, 18954862957863]),
    ];
    for (layer_id, m) in want {
        assert_eq!(hash_multipliers(layer_id, 99_092, 4).unwrap(), m, "layer {layer_id}");
    }
}

#[test]
fn multipliers_match_numpy_for_the_synthetic_vocab_of_64() {
    let want: [(u64, [i64; 4]); 3] = [
        (1, [118650432209603643, 7493640653728489, 55676810147952557, 114555519428547269]),
        (4, [127364524771245009, 7800076361716407, 114038564133282483, 29348051253447937]),
        (14, [104846784527732609, 79754826054943253, 47875908390813667, 127920381107974279]),
    ];
    for (layer_id, m) in want {
        assert_eq!(hash_multipliers(layer_id, 64, 4).unwrap(), m, "layer {layer_id}");
    }
}

#[test]
fn prime_offsets_are_the_exclusive_running_sum() {
    assert_eq!(prime_offsets(&TINY_L1_PRIMES), vec![0, 97, 198, 301, 408, 517]);
    assert_eq!(prime_offsets(&[]), Vec::<u64>::new());
}

#[test]
fn tiny_config_hash_ids_match_the_python_reference_including_a_dead_image_position() {
    let want: [[u32; 12]; 8] = [
        [31, 168, 290, 340, 503, 568, 52, 161, 279, 446, 601, 746],
        [12, 193, 259, 337, 493, 550, 30, 165, 344, 450, 669, 684],
        [41, 148, 202, 365, 507, 585, 56, 250, 264, 417, 583, 797],
        [13, 163, 254, 317, 432, 579, 123, 140, 285, 400, 646, 724],
        [24, 128, 204, 329, 424, 627, 75, 186, 366, 418, 534, 801],
        [78, 163, 223, 312, 460, 583, 121, 237, 378, 404, 677, 823],
        [96, 178, 212, 336, 419, 536, 68, 161, 376, 446, 562, 730],
        [95, 153, 217, 367, 512, 568, 78, 178, 282, 484, 641, 719],
    ];
    let got = tiny_hasher().hash(&tiny_history(), 0, 8).unwrap();
    assert_eq!(got, want.concat());
}

#[test]
fn chunked_hashing_equals_one_shot_hashing() {
    let hasher = tiny_hasher();
    let history = tiny_history();
    let whole = hasher.hash(&history, 0, 8).unwrap();
    let mut parts = Vec::new();
    for (start, len) in [(0, 3), (3, 1), (4, 4)] {
        parts.extend(hasher.hash(&history, start, len).unwrap());
    }
    assert_eq!(parts, whole);
}

#[test]
fn a_dead_position_blocks_every_longer_ngram_behind_it() {
    let hasher = NgramHasher::new(4, 1, 2, 64, vec![layer(1, 64, &[97, 101, 103])]).unwrap();
    let mut a = EngramHistory::new();
    a.extend_raw(&[5, DEAD, 7, 9]);
    let mut b = EngramHistory::new();
    b.extend_raw(&[11, DEAD, 7, 9]);
    // position 3 sees 9, 7, then DEAD: its 3- and 4-gram use pad regardless of position 0
    assert_eq!(hasher.hash(&a, 3, 1).unwrap(), hasher.hash(&b, 3, 1).unwrap());
    // a dead position reads as pad and so does everything before it
    let mut c = EngramHistory::new();
    c.extend_raw(&[2, 2, 7, 9]);
    assert_eq!(hasher.hash(&a, 3, 1).unwrap(), hasher.hash(&c, 3, 1).unwrap());
    let mut d = EngramHistory::new();
    d.extend_raw(&[5, 3, 7, 9]);
    assert_ne!(hasher.hash(&a, 3, 1).unwrap(), hasher.hash(&d, 3, 1).unwrap());
}

#[test]
fn release_sized_hash_ids_match_the_python_reference() {
    const P1: [u64; 24] = [
        16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183, 16000189, 16000207, 16000211,
        16000253, 16000277, 16000289, 16000307, 16000321, 16000339, 16000381, 16000393, 16000399, 16000403, 16000409,
        16000447, 16000463,
    ];
    const P14: [u64; 24] = [
        16000477, 16000487, 16000499, 16000507, 16000511, 16000573, 16000609, 16000627, 16000667, 16000669, 16000693,
        16000697, 16000711, 16000729, 16000759, 16000769, 16000781, 16000799, 16000813, 16000819, 16000841, 16000877,
        16000879, 16000889,
    ];
    assert_eq!(P1.iter().sum::<u64>(), 384_006_168);
    assert_eq!(P14.iter().sum::<u64>(), 384_016_682);
    let layers = vec![layer(1, 99_092, &P1), layer(14, 99_092, &P14)];
    let hasher = NgramHasher::new(4, 8, 2, 99_092, layers).unwrap();
    let mut h = EngramHistory::new();
    h.extend_raw(&[99091, 17, 4242, 98765, 2, 31337]);
    let got = hasher.hash(&h, 3, 3).unwrap();
    assert_eq!(got.len(), 3 * 48);
    let want_pos3: [u32; 48] = [
        7068858, 18058327, 35024898, 51288818, 72124432, 81320231, 111340320, 126574525, 144000363, 155162534,
        163805786, 183797230, 203291939, 217837875, 239654854, 245006935, 256551198, 273943882, 299567966, 312774778,
        332392464, 346037908, 363901980, 368686873, 274804, 24246808, 37734483, 56376094, 74992053, 81916224,
        104721014, 126344138, 140074045, 151660099, 163520134, 176518533, 204809990, 215578517, 224369915, 254091700,
        263968728, 272597250, 295809224, 318748969, 325544976, 343490008, 359699594, 378306598,
    ];
    let want_pos5: [u32; 48] = [
        8512803, 17241923, 35940373, 60228909, 73666727, 91214131, 100438093, 113063454, 140480697, 144208136,
        175657913, 186632616, 195511446, 217909070, 237952641, 241350024, 261893636, 286420468, 299408079, 314517777,
        324818945, 340612751, 354169541, 373224471, 7384521, 21087615, 33319465, 53467295, 79939601, 92165445,
        107346010, 114992896, 134472611, 158770277, 172002395, 191944469, 201644996, 209330297, 228458583, 251701901,
        269677425, 286356428, 293416656, 314193121, 324685494, 350482539, 355690745, 383481605,
    ];
    assert_eq!(&got[..48], &want_pos3);
    assert_eq!(&got[96..], &want_pos5);
}

#[test]
fn setup_rejects_bad_tables_and_hash_rejects_missing_history() {
    let good = layer(1, 64, &TINY_L1_PRIMES);
    let mut short = good.clone();
    short.primes.pop();
    assert!(matches!(NgramHasher::new(4, 2, 2, 64, vec![short]), Err(EngramHashError::Shape { .. })));
    let mut zero = good.clone();
    zero.primes[3] = 0;
    assert!(matches!(NgramHasher::new(4, 2, 2, 64, vec![zero]), Err(EngramHashError::ZeroPrime { index: 3, .. })));
    let mut big = good.clone();
    big.multipliers[0] = i64::MAX / 10;
    assert!(matches!(NgramHasher::new(4, 2, 2, 64, vec![big]), Err(EngramHashError::Multiplier { .. })));
    assert!(matches!(hash_multipliers(1, 0, 4), Err(EngramHashError::EmptyVocab)));
    let hasher = tiny_hasher();
    let err = hasher.hash(&tiny_history(), 6, 3);
    assert!(matches!(err, Err(EngramHashError::History { end: 9, len: 8, .. })));
}

#[test]
fn history_rejects_unknown_tokens_atomically_and_truncates_for_rollback() {
    let map = TokenMap::synthetic(100, 64);
    let mut h = EngramHistory::new();
    h.extend(&map, &[1, 2, 3], None).unwrap();
    assert!(matches!(h.extend(&map, &[4, 100], None), Err(EngramHashError::UnknownToken(100))));
    assert_eq!(h.as_slice(), &[1, 2, 3]);
    h.truncate(1);
    assert_eq!(h.as_slice(), &[1]);
}
