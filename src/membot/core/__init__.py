"""The transport-free conversation core: consultations, the conversation service, sessions."""
