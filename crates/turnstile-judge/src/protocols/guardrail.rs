//! `tables/guardrail.ron`: one turn's safety checks — the user's message
//! before any model sees it, each sentence of the answer before it is shown.

use super::Protocol;

crate::names! {
    pub enum GuardrailState {
        /// The message is being checked; nothing has seen it.
        Input = "Input",
        /// The message passed; the answer is being written.
        Model = "Model",
        /// One sentence of the answer is being checked.
        Output = "Output",
        /// The message was refused; only code's refusal is said.
        Blocked = "Blocked",
        Shown = "Shown",
        Refused = "Refused",
    }
}

crate::names! {
    /// A checker's verdict on the message (`input_*`) or on one sentence
    /// (`output_*`); of several at once, the table's precedence fires one.
    pub enum GuardrailEvent {
        InputPass = "input_pass",
        InputRedact = "input_redact",
        InputBlock = "input_block",
        /// The checker could not answer, and is configured to fail open.
        InputUnavailableOpen = "input_unavailable_open",
        /// The checker could not answer, and is configured to fail closed.
        InputUnavailableClosed = "input_unavailable_closed",
        /// A turn resumed by a decision: its message was checked when the
        /// turn began.
        Resumed = "resumed",
        /// A sentence of the answer (the model's or code's) is ready.
        Sentence = "sentence",
        OutputPass = "output_pass",
        OutputRedact = "output_redact",
        OutputBlock = "output_block",
        OutputUnavailableOpen = "output_unavailable_open",
        OutputUnavailableClosed = "output_unavailable_closed",
        /// Code's sentence that says why the message was refused.
        Refusal = "refusal",
        /// The turn's answer is over.
        AnswerEnd = "answer_end",
    }
}

crate::names! {
    pub enum GuardrailEffect {
        /// Go on to the model with the message as written.
        AskModel = "ask-model",
        /// Go on to the model with the redacted message.
        AskModelRedacted = "ask-model-redacted",
        /// Ask no model: code says why the message was refused.
        RefuseInput = "refuse-input",
        /// Run the output checks on the sentence.
        CheckOutput = "check-output",
        /// Send the sentence as written.
        Show = "show",
        /// Send the sentence with what the checker found taken out.
        ShowRedacted = "show-redacted",
        /// Send code's sentence, with the row, in its place.
        ReplaceOutput = "replace-output",
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guardrail;

impl Protocol for Guardrail {
    const NAME: &'static str = "guardrail";
    type State = GuardrailState;
    type Event = GuardrailEvent;
    type Effect = GuardrailEffect;
}
