; What the installer installs: the program (required), the starter model, a bundled
; model when the build has one, and a desktop shortcut. The payload's file lists come
; from the generated ${PAYLOAD} (scripts/make_installer.py), made from the frozen folder.

!include "${PAYLOAD}"

; The payload macro's files, stored without compression (and compression back after).
!macro KESTREL_STORED FILES
  SetCompress off
  !insertmacro ${FILES}
  !if "${COMPRESSOR}" != "none"
    SetCompress auto
  !endif
!macroend

Section "!${APP_NAME}" SecProgram
  SectionIn RO
  ; Again here: a silent install (/S) shows no pages, and the user may have started
  ; Kestrel since the directory page.
  Call CloseRunningKestrel
  ${If} $KestrelClosed == "cancel"
    SetErrorLevel 2
    Abort "${APP_NAME} is still running, so it was not changed."
  ${EndIf}
  Call RemovePreviousInstall
  SetOutPath "$INSTDIR"
  !insertmacro KESTREL_PROGRAM_FILES
  WriteUninstaller "$INSTDIR\${UNINSTALLER}"
  CreateShortcut "$SMPROGRAMS\${APP_NAME}.lnk" "$INSTDIR\${GUI_EXE}" "" "$INSTDIR\${GUI_EXE}" 0
SectionEnd

!ifdef STARTER
Section "Starter model (Qwen2.5-Coder 0.5B Instruct, 491 MB)" SecStarter
  ; Stored, not compressed: quantized weights hardly shrink and would only slow the build.
  !insertmacro KESTREL_STORED KESTREL_STARTER_FILES
SectionEnd
!endif

!ifdef BUNDLED_MODEL_FOLDER
; Goes straight into the user's models folder, like a model downloaded in the app: it
; is the user's from then on, kept by the uninstaller unless they ask to remove their
; models too (installer/README.md says why it is not in the program folder).
Section "${BUNDLED_MODEL_NAME}" SecBundled
  ${If} ${FileExists} "${DATA_DIR}\models\${BUNDLED_MODEL_FOLDER}\model.json"
    DetailPrint "${BUNDLED_MODEL_NAME} is in your models folder already; it is kept as it is."
  ${Else}
    !insertmacro KESTREL_STORED KESTREL_BUNDLED_FILES
  ${EndIf}
SectionEnd
!endif

Section /o "Desktop shortcut" SecDesktop
  CreateShortcut "$DESKTOP\${APP_NAME}.lnk" "$INSTDIR\${GUI_EXE}" "" "$INSTDIR\${GUI_EXE}" 0
SectionEnd

; Last, so the size it records counts every component chosen.
Section "-Register"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayName" "${APP_NAME}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayVersion" "${APP_VERSION}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "Publisher" "${PUBLISHER}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\${GUI_EXE},0"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\${UNINSTALLER}"'
  WriteRegStr HKCU "${UNINSTALL_KEY}" "QuietUninstallString" '"$INSTDIR\${UNINSTALLER}" /S'
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoRepair" 1
  ${GetSize} "$INSTDIR" "/S=0K" $0 $1 $2
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "EstimatedSize" $0
SectionEnd

!insertmacro MUI_FUNCTION_DESCRIPTION_BEGIN
  !insertmacro MUI_DESCRIPTION_TEXT ${SecProgram} "${APP_NAME} itself, with a Start-menu shortcut."
  !ifdef STARTER
    !insertmacro MUI_DESCRIPTION_TEXT ${SecStarter} "A small model that works at once, offline. Without it, ${APP_NAME} offers to download a model when it starts."
  !endif
  !ifdef BUNDLED_MODEL_FOLDER
    !insertmacro MUI_DESCRIPTION_TEXT ${SecBundled} "A larger, better model, put in your models folder (${DATA_DIR}\models), so no download is needed."
  !endif
  !insertmacro MUI_DESCRIPTION_TEXT ${SecDesktop} "A shortcut to ${APP_NAME} on your desktop."
!insertmacro MUI_FUNCTION_DESCRIPTION_END
