//! The language of a text, as every part of the product reads it: the
//! narration guard (which vocabulary), the models (which sentences) and the
//! code's own sentences. One detector, so that a message is never Korean to
//! one and English to another.

use serde::Deserialize;

/// A language the product writes and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Lang {
    En,
    Ko,
}

/// The language of `text`: Korean when it holds any Hangul, else English.
pub fn detect(text: &str) -> Lang {
    match text.chars().any(is_hangul) {
        true => Lang::Ko,
        false => Lang::En,
    }
}

/// Hangul syllables and jamo.
pub fn is_hangul(c: char) -> bool {
    matches!(c, '\u{AC00}'..='\u{D7A3}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hangul_of_any_kind_is_korean() {
        assert_eq!(detect("show safety issues on floor 3"), Lang::En);
        assert_eq!(detect("3층 안전 지적사항 보여줘"), Lang::Ko);
        // Compatibility jamo alone ("ㅋㅋ") is Korean too.
        assert_eq!(detect("ok ㅋㅋ"), Lang::Ko);
    }
}
