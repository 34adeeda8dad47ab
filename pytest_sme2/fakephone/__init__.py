"""A fake Android phone behind the real adb server, for tests and for users' CI without a phone
(``pytest-sme2 fake-phone``): the adb transport's device side (:mod:`.adbd`), the phone's files
(:mod:`.sandbox`) and the command that serves one (:mod:`.serve`)."""
