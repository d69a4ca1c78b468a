"""What users send besides text: voice and video notes (transcribed), photos and image
documents (shown to vision models), documents (read as text).

    errors      MediaError and its kinds (too big, unsupported, broken, too large, ...)
    audio       OGG/Opus for transcription out of any audio/video, duration and its limit
    transcribe  Transcriber: OpenRouter's /audio/transcriptions, usage charged like a call
    documents   PDF text layer and text files: kind by MIME type and name, text decoded
    pdf         PdfProcesses: a PDF read in a child process, bounded in time and memory
    pdf_child   that child (the standard library and pypdf only)
    text        decoding with fallbacks, chunks for search, the cut for the prompt
    images      the photo size to fetch, ImageDecoder (bounded in pixels and decodes at
                once) scaling images for a model, the image_url part
    memory      glibc told to unmap large blocks when freed (decoded pixels)
    catalog     ModelCatalog: which models see images (OpenRouter's /models), kept fresh
    provider    the openai client for those endpoints and the LLMError its failures are

No aiogram here and nothing of the turn: the front doors download, the turn decides; this
package only turns bytes into what a model and the memory take."""
