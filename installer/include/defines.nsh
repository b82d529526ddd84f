; The facts of this build, all passed by scripts/make_installer.py (-D on its command line);
; a missing one stops the compile here rather than producing a half-labelled installer.

!macro KESTREL_REQUIRE NAME
  !ifndef ${NAME}
    !error "${NAME} is not defined: build the installer with scripts/make_installer.py"
  !endif
!macroend

!insertmacro KESTREL_REQUIRE APP_NAME        ; Kestrel (app/core/paths.py APP_NAME)
!insertmacro KESTREL_REQUIRE APP_VERSION     ; from pyproject.toml, e.g. 0.1.0
!insertmacro KESTREL_REQUIRE VI_VERSION      ; the same as four numbers, e.g. 0.1.0.0
!insertmacro KESTREL_REQUIRE PUBLISHER
!insertmacro KESTREL_REQUIRE LICENSE         ; pyproject.toml's license
!insertmacro KESTREL_REQUIRE GUI_EXE         ; the windowed program, Kestrel.exe on Windows
!insertmacro KESTREL_REQUIRE CLI_EXE         ; the console program for kestrel chat/doctor/models
!insertmacro KESTREL_REQUIRE DATA_AUTHOR     ; platformdirs: $LOCALAPPDATA\<author>\<app> holds the user's data
!insertmacro KESTREL_REQUIRE DATA_APP
!insertmacro KESTREL_REQUIRE PAYLOAD         ; the generated payload.nsh: files and how to remove them
!insertmacro KESTREL_REQUIRE OUTFILE
!insertmacro KESTREL_REQUIRE COMPRESSOR      ; lzma for a release; zlib or none for a quick check

; Optional: ICON (the .ico for installer and uninstaller), STARTER (the payload has the
; starter model's folders), BUNDLED_MODEL_NAME and BUNDLED_MODEL_FOLDER (a catalog model
; fetched by scripts/fetch_bundled_model.py, copied into the user's models folder).

!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\${APP_NAME}"
!define UNINSTALLER "uninstall.exe"
; Where the app keeps chats, settings, models, cache and logs on Windows: platformdirs'
; %LOCALAPPDATA%\<author>\<app> (data and config are the same folder; Cache and Logs are
; inside it). tests/frozen/test_installer.py checks this against platformdirs itself.
!define DATA_DIR "$LOCALAPPDATA\${DATA_AUTHOR}\${DATA_APP}"
