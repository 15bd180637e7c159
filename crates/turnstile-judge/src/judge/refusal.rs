//! The licence gate's refusal in the user's words: structured copy in five
//! languages (ko, en, ja, zh, es), written by code, never by a model
//! (issue 20 §5, seed 003 §4.6).
//!
//! The copy names what cannot be done and, for a partial permission, what
//! can ("I can do this part; shall I?"). It carries no tier names and none
//! of the words of the permission system: the answer becomes thread
//! history, and the planner's prompt must stay blind to licensing.

use serde::Serialize;

/// A language the refusal copy is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyLang {
    Ko,
    En,
    Ja,
    Zh,
    Es,
}

impl CopyLang {
    pub const ALL: [CopyLang; 5] = [
        CopyLang::Ko,
        CopyLang::En,
        CopyLang::Ja,
        CopyLang::Zh,
        CopyLang::Es,
    ];

    /// The language of the user's message: Hangul → ko, kana → ja, Han
    /// without kana → zh, Spanish marks or words → es, else en.
    pub fn of(text: &str) -> CopyLang {
        let mut han = false;
        for c in text.chars() {
            if crate::judge::lang::is_hangul(c) {
                return CopyLang::Ko;
            }
            if matches!(c, '\u{3040}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}') {
                return CopyLang::Ja;
            }
            han |= matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}');
        }
        if han {
            return CopyLang::Zh;
        }
        let lower = text.to_lowercase();
        let spanish_mark = lower.chars().any(|c| matches!(c, '¿' | '¡' | 'ñ'));
        let spanish_word = lower
            .split(|c: char| !c.is_alphabetic())
            .any(|w| SPANISH_WORDS.contains(&w));
        match spanish_mark || spanish_word {
            true => CopyLang::Es,
            false => CopyLang::En,
        }
    }
}

/// Words common in Spanish requests and not English ones.
const SPANISH_WORDS: &[&str] = &[
    "muestra",
    "muéstrame",
    "busca",
    "buscar",
    "dame",
    "quiero",
    "fotos",
    "piso",
    "planta",
    "los",
    "las",
    "del",
    "por",
    "favor",
    "qué",
    "cuántos",
    "cuántas",
    "hay",
    "con",
    "seguridad",
    "todos",
    "todas",
    "abre",
    "abrir",
    "ver",
];

/// What a refusal frame carries: the row, the language and the sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The table whose forbidden row refused (`licence`).
    pub table: &'static str,
    pub row_id: String,
    pub lang: CopyLang,
    /// Code's sentence for the user, in `lang`.
    pub message: String,
}

/// The refusal copy: nothing of the request can be done here, or only the
/// part done with `possible` (tool names the user may use).
pub fn copy(lang: CopyLang, possible: &[String]) -> String {
    if possible.is_empty() {
        return match lang {
            CopyLang::Ko => "요청하신 작업은 현재 계정에서 사용할 수 없어 실행하지 않았습니다.",
            CopyLang::En => {
                "What you asked for is not available to your account, so I did not run it."
            }
            CopyLang::Ja => {
                "ご依頼の操作はお使いのアカウントではご利用いただけないため、実行しませんでした。"
            }
            CopyLang::Zh => "您请求的操作对您的账户不可用，因此没有执行。",
            CopyLang::Es => {
                "Lo que pidió no está disponible para su cuenta, así que no lo ejecuté."
            }
        }
        .to_string();
    }
    let tools = possible.join(", ");
    match lang {
        CopyLang::Ko => format!(
            "이 중 일부({tools})는 할 수 있지만, 나머지는 현재 계정에서 사용할 수 없어 아무것도 실행하지 않았습니다. 가능한 부분만 진행할까요?"
        ),
        CopyLang::En => format!(
            "I can do part of this ({tools}), but the rest is not available to your account, so I have not run anything yet. Shall I go ahead with the part I can do?"
        ),
        CopyLang::Ja => format!(
            "このうち一部（{tools}）は実行できますが、残りはお使いのアカウントではご利用いただけないため、まだ何も実行していません。可能な部分だけ進めましょうか？"
        ),
        CopyLang::Zh => format!(
            "其中一部分（{tools}）可以完成，但其余部分对您的账户不可用，所以我还没有执行任何操作。要只进行可以完成的部分吗？"
        ),
        CopyLang::Es => format!(
            "Puedo hacer una parte ({tools}), pero el resto no está disponible para su cuenta, así que aún no he ejecutado nada. ¿Sigo con la parte que sí puedo hacer?"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_language_is_detected_and_has_both_copies() {
        assert_eq!(CopyLang::of("3층 사진 보여줘"), CopyLang::Ko);
        assert_eq!(CopyLang::of("3階の写真を見せて"), CopyLang::Ja);
        assert_eq!(CopyLang::of("显示三楼的照片"), CopyLang::Zh);
        assert_eq!(CopyLang::of("muéstrame las fotos del piso 3"), CopyLang::Es);
        assert_eq!(CopyLang::of("show photos of floor 3"), CopyLang::En);
        for lang in CopyLang::ALL {
            let none = copy(lang, &[]);
            let part = copy(lang, &["search_photos".into()]);
            assert!(!none.is_empty() && none != part);
            assert!(part.contains("search_photos"));
        }
    }
}
