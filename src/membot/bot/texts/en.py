"""The bot's own words in English: the fallback for every language it does not speak."""

from __future__ import annotations

from membot.bot.texts.base import Texts

EN = Texts(
    START=(
        "Hi! I'm membot, an assistant that remembers our conversation, even across restarts.\n"
        "Just write to me. /help lists what else I can do."
    ),
    HELP=(
        "Write me anything and I'll answer, keeping the context of our chat.\n\n"
        "/consult [N] <request> - a consultation: I ask what I need to know, then give one "
        "complete answer (N rounds, {rounds} by default, at most {max_rounds})\n"
        "/finish - the consultation's final answer now\n"
        "/cancel - end the consultation without an answer\n"
        "/summary - what I remember of our earlier conversation\n"
        "/memory - what I keep of this chat (facts, summary): see it, delete a fact\n"
        "/export - this chat's whole memory as a ZIP\n"
        "/language [code] - the language of this chat: see it, or set it (e.g. /language ru)\n"
        "/model [id] - this chat's model: see it, or choose another\n"
        "/persona [text | reset] - this chat's own instructions for me\n"
        "/search [on | off] - whether I may search the web in this chat (I list the pages "
        "I used under my answer)\n"
        "/usage - what you (and this chat) have used today and this month\n"
        '/tasks - the reminders and tasks set in this chat (ask me: "remind me tomorrow '
        'at 9 to call the bank")\n'
        "/timezone [zone] - this chat's time zone: see it, or set it (e.g. "
        "/timezone Europe/Berlin)\n"
        "/tools - what I can use here: built-in tools and tools from connected servers\n"
        "/import - bring in your ChatGPT or Claude conversations (send the export with "
        "this caption)\n"
        "/forget <words> - erase for good every message holding the words (I show them first)\n"
        "/reset - forget everything in this chat\n"
        "/help - this message\n\n"
        "Voice messages, photos and documents (PDF, text, code) work too.\n"
        "In groups, mention me or reply to my message (a voice message: reply to mine)."
    ),
    RESET_DONE="Done: I've forgotten everything in this chat. Let's start over.",
    NO_SUMMARY=(
        "There is no summary yet: the first comes after {first} messages, then one every "
        "{every} (the latest {window} are always kept word for word)."
    ),
    SUMMARY="Here is what I remember of our earlier conversation:\n\n{summary}",
    NO_FACTS=(
        "I'm not keeping any facts for this chat yet. Ask me to remember something, "
        'e.g. "remember that I prefer short answers".'
    ),
    FACTS="Facts I keep for this chat:\n\n{facts}\n\nAsk me to forget any of them at any time.",
    FACT_DELETE_BUTTON="🗑 {n}",
    FACT_DELETED="Deleted: {fact}",
    FACT_CHANGED="That fact has changed or is gone already; the list shows what I keep now.",
    FACTS_ALL_DELETED="The facts listed here are deleted.",
    MEMORY_FORGET_BUTTON="Forget…",
    MEMORY_EXPORT_BUTTON="Export",
    PERSONAL_FROM="From the group “{chat}”:",
    PERSONAL_START=(
        "{name}, this is for your eyes only and I can't show it to you here. Start a private "
        "chat with me (@{bot}), then ask here again: I'll answer there."
    ),
    TEXT_ONLY=(
        "Sorry, I can't read this kind of message. I read text, voice and audio messages, "
        "video notes, photos and documents (PDF, text, code)."
    ),
    LLM_BUSY="I'm getting too many requests right now. Please try again in a minute.",
    LLM_FAILED="Sorry, I couldn't get an answer right now. Please try again.",
    INTERNAL_ERROR="Sorry, something went wrong on my side. Please try again.",
    TASK_DROPPED=(
        "⏰ A scheduled task was dropped: it was due {now}, and I was not running then. "
        "The task: {text}"
    ),
    TASK_NOT_RUN="⏰ A scheduled task was not carried out. {reason} The task: {text}",
    ROUND="_Round {round} of {max_rounds}_",
    ROUND_FINAL="_Round {round} of {max_rounds}: the consultation is complete._",
    STOPPED="_Stopped._",
    CONSULT_USAGE=(
        "Tell me what the consultation is about: /consult [N] <request>, e.g. "
        '"/consult 3 help me plan a week in Rome". N is the number of rounds ({rounds} if '
        "omitted)."
    ),
    CONSULT_BAD_ROUNDS="The number of rounds must be from 1 to {max_rounds}.",
    CONSULT_IN_PROGRESS=(
        "A consultation is already in progress (round {round} of {max_rounds} is next). "
        "Answer my questions, /finish for the final answer now, or /cancel it."
    ),
    NOT_CONSULTING="There is no consultation in progress. Start one with /consult <request>.",
    CONSULT_CANCELLED=(
        "Consultation cancelled in round {round} of {max_rounds}, without a final answer. "
        "We're back to a normal chat."
    ),
    CONSULT_GOES_ON=(
        "The consultation goes on: round {round} of {max_rounds} is next (/finish, /cancel)."
    ),
    CONSULT_ENDED_BY_RESET="The consultation in progress has ended too.",
    FINISH_REQUEST="Please give me your final answer now.",
    LANGUAGE_IS="The language of this chat: {name} ({code}). Change it with /language <code>.",
    LANGUAGE_UNKNOWN=(
        "I don't know the language of this chat yet: I'll tell it from your next message. "
        "Or set it with /language <code>, e.g. /language en."
    ),
    LANGUAGE_SET="Done: the language of this chat is now {name} ({code}).",
    LANGUAGE_BAD_CODE='I don\'t know the language code "{code}". Supported: {supported}.',
    OVER_DAILY="You've reached your daily budget. It resets at 00:00 UTC ({wait}).",
    OVER_MONTHLY="You've reached your monthly budget. It resets on {date} at 00:00 UTC ({wait}).",
    OVER_RATE="Too many messages: at most {limit} a minute. You can write again {wait}.",
    IN_HOURS="in {hours} h {minutes} min",
    IN_MINUTES="in {minutes} min",
    IN_SECONDS="in {seconds} s",
    MODEL_IS="This chat's model: {model}. Choose another:",
    MODEL_ONLY=(
        "This chat's model: {model}. It is the only one offered here: the bot's operator "
        "can offer more in the MODELS setting."
    ),
    MODEL_SET="Done: this chat now uses {model}.",
    MODEL_UNKNOWN='I can\'t use "{model}" here. Choose one of: {choices}.',
    MODEL_GONE="This button is from an older list of models. Choose one of: {choices}.",
    MODEL_CHOSEN="✓ {model}",
    ADMINS_ONLY="Only the group's administrators can change this.",
    PERSONA_IS=(
        "This chat's persona:\n\n{persona}\n\n"
        "Change it with /persona <text>, or go back to the default with /persona reset."
    ),
    PERSONA_DEFAULT="This chat uses the default persona. Give it its own with /persona <text>.",
    PERSONA_SET="Done: this chat has its own persona now ({length} characters).",
    PERSONA_RESET="Done: this chat is back to the default persona.",
    PERSONA_TOO_LONG="A persona can be at most {limit} characters; this one has {length}.",
    USAGE_YOURS="Your usage\nToday: {day}\nThis month: {month}",
    USAGE_CHAT="This chat\nToday: {day}\nThis month: {month}",
    USAGE_LINE=(
        "{tokens} tokens ({prompt} in, {cached}% of them cached; {completion} out), cost {cost}"
    ),
    USAGE_NONE="nothing yet",
    USAGE_COST_UNKNOWN="unknown (the provider reported no price for these calls)",
    USAGE_COST_PARTIAL=(
        "{cost}, plus {unpriced} call(s) of unknown cost (the provider reported no price)"
    ),
    SEARCH_ON=(
        "Web search is on in this chat: I look things up when a question needs it and list "
        "my sources under the answer. Turn it off with /search off."
    ),
    SEARCH_OFF="Web search is off in this chat: I answer from what I know. /search on turns it on.",
    SEARCH_SET_ON="Done: I may search the web in this chat again.",
    SEARCH_SET_OFF="Done: I won't search the web in this chat.",
    SEARCH_BY_OPERATOR=(
        "Web search is turned off for this bot by its operator (the WEB_SEARCH setting), so "
        "it can't be turned on in a chat."
    ),
    SEARCH_USAGE="Use /search on or /search off (/search alone says how it is now).",
    SOURCES="Sources:",
    CITED="From this chat:",
    CITED_SELF="My answer",
    TIMEZONE_IS=(
        "This chat's time zone: {zone}. It is {now} there. Change it with /timezone <zone>, "
        "e.g. /timezone Europe/Berlin."
    ),
    TIMEZONE_SET="Done: this chat's time zone is now {zone}. It is {now} there.",
    TIMEZONE_BAD=(
        'I don\'t know the time zone "{zone}". Use an IANA name such as Europe/Berlin, '
        "America/New_York, Asia/Tokyo or UTC."
    ),
    NO_TASKS=(
        'There are no tasks in this chat. Ask me for one, e.g. "remind me tomorrow at 9 '
        'to call the bank" or "every Monday at 8 tell me the weather in Lisbon".'
    ),
    TASKS_HEADER="Tasks in this chat ({count}):",
    TASKS_MORE="…and {more} more.",
    TASK_ONCE="once",
    REPEAT_HOURLY="every hour",
    REPEAT_DAILY="every day",
    REPEAT_WEEKLY="every week",
    REPEAT_MONTHLY="every month",
    REPEAT_YEARLY="every year",
    REPEAT_RULE="repeats: {rule}",
    TASK_SET_BY="set by {name}",
    TASK_CANCEL_BUTTON="✕ Cancel {n}",
    TASK_CANCELLED="Cancelled: {text}",
    TASK_GONE="This task is no longer scheduled.",
    TASK_NOT_YOURS="Only the task's author or an administrator can cancel it.",
    TOOLS_HEADER="What I can use in this chat:",
    TOOLS_BUILTIN="Built in: {names}",
    TOOLS_TASKS="Reminders and tasks: {names}",
    TOOLS_SERVER="From {server}: {names}",
    TOOLS_SERVER_DOWN="{server}: not reachable right now",
    TOOLS_ADMINS_ONLY=" (only when an admin writes)",
    TOOLS_NONE="I have no tools in this chat: I answer from what I know and what we said.",
    TOOLS_WEB="Web search, with the sources under the answer",
    TOOLS_WEB_OFF="Web search: off in this chat (/search on turns it on)",
    FILE_TOO_BIG="This file is too big for me: I can read files of up to {limit_mb} MB.",
    FILE_UNSUPPORTED=(
        "I can't read this kind of file. I read PDFs with text, text files (plain text, "
        "Markdown, CSV, JSON, code), images, voice and audio."
    ),
    FILE_BROKEN="I couldn't open this file: it seems damaged or incomplete.",
    PDF_NO_TEXT=(
        "This PDF has no text layer (scanned pages?), so I can't read it. Send its text, "
        "or photos of the pages."
    ),
    NO_SOUND="I couldn't hear anything: this recording has no sound.",
    AUDIO_TOO_LONG="This recording is too long: I listen to at most {minutes} min.",
    NOT_IMAGE="This file was sent as an image, but it isn't one, so I can't look at it.",
    NOT_AUDIO="This file was sent as audio, but it isn't a recording, so there's nothing to hear.",
    NOT_TEXT=(
        "This isn't a text file: it holds binary data, not text in UTF-8, UTF-16, "
        "Windows-1251 or Windows-1252, so I can't read it."
    ),
    PDF_TOO_COMPLEX=(
        "I couldn't read this PDF: it is built in a way too complex for me (nested too "
        "deeply, or too heavy to read). Send its text, or photos of the pages."
    ),
    IMAGE_TOO_LARGE=(
        "This image has too many pixels for me: I open images of up to {limit_mp} "
        "megapixels. Send it as a photo, or make it smaller first."
    ),
    FILE_NAMED="“{name}”: {reply}",
    NO_IMAGES=(
        "This chat's model ({model}) can't see images. These can: {models}. Choose one with /model."
    ),
    NO_IMAGES_AT_ALL=(
        "This chat's model ({model}) can't see images, and no model offered here can. "
        "Describe the picture in words, or ask the bot's operator to add a model that sees "
        "images to MODELS."
    ),
    IMPORT_SEND=(
        "Send me the export as a file now (within {minutes} minutes): from ChatGPT the ZIP of "
        "Settings → Data controls → Export data, or its conversations.json; from Claude the "
        "ZIP of Settings → Privacy → Export data, or its conversations.json."
    ),
    IMPORT_DONE=(
        "Imported {conversations} conversations, {messages} messages, from {first} to "
        "{last}. Ask me about them any time: I search them when needed, and they stay out "
        "of our recent messages and the summary."
    ),
    IMPORT_NOTHING_NEW="Nothing new to import: every conversation in it is here already.",
    IMPORT_NOT_EXPORT=(
        "This is not a ChatGPT or Claude export (the ZIP from Export data, or its "
        "conversations.json). Nothing was imported."
    ),
    IMPORT_BROKEN=(
        "I couldn't read this export: the ZIP or JSON is damaged or incomplete. Nothing was "
        "imported."
    ),
    IMPORT_TOO_BIG=(
        "This export is too big: I import up to {limit_mb} MB. A ZIP of conversations.json "
        "alone is much smaller. Nothing was imported."
    ),
    IMPORT_TOO_MANY=(
        "This export has {count} new messages, and this chat keeps at most {limit}. Nothing "
        "was imported."
    ),
    IMPORT_ADMINS_ONLY="Only the group's administrators can import into this chat.",
    EXPORT_STARTED=(
        "Preparing this chat's memory as a ZIP: the conversation, the summary, the facts, "
        "the tasks and the files. It comes here as a document."
    ),
    EXPORT_RUNNING="This chat's export is already being prepared: it comes here as a document.",
    EXPORT_ADMINS_ONLY="Only the group's administrators can export this chat's memory.",
    EXPORT_CAPTION="This chat's memory up to {date}: {messages} messages, {files} files.",
    EXPORT_PART=(
        " Part {part} of {parts}: each part is a ZIP of its own, and messages.jsonl and "
        "conversation.md go on from one part to the next."
    ),
    EXPORT_FAILED="I couldn't prepare the export just now. Try /export again later.",
    NOT_ALLOWED="Sorry, this bot is private.",
    GUEST_NO_CHAT=(
        "I answer here from what you told me in our private chat, and we have none yet: "
        "write to me at @{bot} first."
    ),
    GUEST_TOO_LATE="Sorry, I ran out of time for this one. Please ask me again.",
    GUEST_CUT="_Cut short: time was up._",
    COMMANDS=(
        ("start", "Say hello"),
        ("help", "What I can do"),
        ("consult", "A consultation: questions first, then one full answer"),
        ("finish", "The consultation's final answer now"),
        ("cancel", "End the consultation without an answer"),
        ("summary", "What I remember of our earlier chat"),
        ("memory", "What I remember: see and correct it"),
        ("export", "This chat's memory as a ZIP"),
        ("language", "The language of this chat"),
        ("model", "The model this chat uses"),
        ("persona", "This chat's own instructions for me"),
        ("search", "Web search in this chat: on or off"),
        ("usage", "What you have used today and this month"),
        ("tasks", "Reminders and tasks in this chat"),
        ("timezone", "This chat's time zone"),
        ("tools", "What I can use in this chat"),
        ("import", "Bring in ChatGPT or Claude conversations"),
        ("forget", "Erase messages holding some words, for good"),
        ("reset", "Forget this chat"),
    ),
)
