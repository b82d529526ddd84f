; The uninstaller: removes the program, its shortcuts and its registry entry, and keeps
; the user's chats, settings and models unless they tick the box (or pass /REMOVEUSERDATA).
; /UPGRADE (the next version's installer) removes only the program files.

Var UpgradeMode

Section "!un.${APP_NAME} (the program and its shortcuts)" SecUnProgram
  SectionIn RO
  ${If} $UpgradeMode == ""
    ; The installer closed it already when this runs as part of an update.
    Call un.CloseRunningKestrel
    ${If} $KestrelClosed == "cancel"
      SetErrorLevel 2
      Abort "${APP_NAME} is still running, so it was not removed."
    ${EndIf}
  ${EndIf}
  !insertmacro KESTREL_REMOVE_PROGRAM_FILES
  Delete "$INSTDIR\${UNINSTALLER}"
  ${If} $UpgradeMode == ""
    Delete "$SMPROGRAMS\${APP_NAME}.lnk"
    Delete "$DESKTOP\${APP_NAME}.lnk"
    DeleteRegKey HKCU "${UNINSTALL_KEY}"
  ${EndIf}
  ; Only when empty: anything the user put in this folder stays.
  RMDir "$INSTDIR"
SectionEnd

Section /o "un.Also remove my chats, settings and models" SecUnData
  ; Never a path built on an empty variable (that would be a folder at the drive's root).
  ${If} $LOCALAPPDATA != ""
    DetailPrint "Removing your chats, settings and models in ${DATA_DIR}"
    RMDir /r "${DATA_DIR}"
    RMDir "$LOCALAPPDATA\${DATA_AUTHOR}"
  ${EndIf}
SectionEnd

; After the sections: it selects one by its index.
Function un.onInit
  StrCpy $UpgradeMode ""
  ${GetParameters} $R0
  ClearErrors
  ${GetOptions} $R0 "/UPGRADE" $R1
  ${IfNot} ${Errors}
    StrCpy $UpgradeMode "1"
  ${EndIf}
  ClearErrors
  ${GetOptions} $R0 "/REMOVEUSERDATA" $R1
  ${IfNot} ${Errors}
  ${AndIf} $UpgradeMode == ""
    !insertmacro SelectSection ${SecUnData}
  ${EndIf}
FunctionEnd

!insertmacro MUI_UNFUNCTION_DESCRIPTION_BEGIN
  !insertmacro MUI_DESCRIPTION_TEXT ${SecUnProgram} "Removes ${APP_NAME} from $INSTDIR, its shortcuts and its entry in Installed apps."
  !insertmacro MUI_DESCRIPTION_TEXT ${SecUnData} "Also deletes ${DATA_DIR}: your chats, settings, logs and the models in Kestrel's models folder. Models you keep in your own folders are not touched."
!insertmacro MUI_UNFUNCTION_DESCRIPTION_END
